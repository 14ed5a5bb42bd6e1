"""Kafka transactions: the transaction coordinator on ``__transaction_state`` (a sharded
coordinator like the groups'), its log records in Kafka's format, and the markers it writes."""

from bmq.coordinators.transactions.coordinator import ProducerIdAndEpoch, TransactionCoordinator
from bmq.coordinators.transactions.core import append_marker
from bmq.coordinators.transactions.records import TxnMetadata, TxnState
from bmq.metadata.topics import TRANSACTION_TOPIC

__all__ = ["TRANSACTION_TOPIC", "ProducerIdAndEpoch", "TransactionCoordinator", "TxnMetadata",
           "TxnState", "append_marker"]
