"""The write path of the partitions a broker owns: appends in memory, a group-commit writer that
makes them durable, and the waits built on it (acks=all, long polls, coordinators' writes)."""
