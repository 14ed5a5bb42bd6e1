"""Kafka transactions: the transaction coordinator on ``__transaction_state`` (a sharded
coordinator like the groups'), its log records in Kafka's format, and the markers it writes."""

from bmq.coordinators.transactions.coordinator import ProducerIdAndEpoch, TransactionCoordinator
from bmq.coordinators.transactions.core import TRANSACTION_TOPIC, append_marker
from bmq.coordinators.transactions.records import TxnMetadata, TxnState

__all__ = ["TRANSACTION_TOPIC", "ProducerIdAndEpoch", "TransactionCoordinator", "TxnMetadata",
           "TxnState", "append_marker"]
