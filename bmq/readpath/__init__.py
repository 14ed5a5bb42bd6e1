"""The read path every role serves Fetch and ListOffsets through: durable data of a partition
read through a view of its log (``partition_view``) and a byte-bounded record cache shared by all
consumers (``cache``), with a long poll woken by notice of new data (``fetch``,
``list_offsets``). A role supplies the views (``fetch.FetchServer``): a broker over its own logs
(``bmq.broker.fetch_views``), a proxy over shared storage (``bmq.proxy.proxy``)."""
