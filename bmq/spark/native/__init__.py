"""The C part of the Spark integration: ``_recdecode``, the record decoder under
``bmq.spark.decode``. It has a package of its own because import-linter (grimp) does not see
compiled modules and counts an import of one as an import of its package: beside ``bmq.spark``'s
``__init__``, which imports the data source, it would close a circle through the per-task read
(``tasks``) and ``decode``."""
