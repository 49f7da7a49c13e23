"""kafkapy: Kafka's wire protocol from the broker side."""

__version__ = "0.1.0"
