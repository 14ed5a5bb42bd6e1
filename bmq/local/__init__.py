"""`bmq local`: a whole cluster on this machine for trying cluster mode, in one command.

It starts the installed ZooKeeper (Debian's ``zookeeper`` package, run with java, no systemd),
a controller, N brokers and optionally a proxy on ``file://`` storage in one directory, prints
their addresses, and stops them all on Ctrl-C, as ``confluent local`` or ``rpk container``
do. Every role runs as its own ``bmq`` process, exactly as an operator would run it.

``zookeeper``  the ZooKeeper server (also the tests' throw-away one)
``cluster``    starting, watching and stopping the processes
``command``    the click command
"""
