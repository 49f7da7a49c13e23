"""The data plane: partitions, Produce and Fetch on top of the partition logs (kafkapy.log)."""
