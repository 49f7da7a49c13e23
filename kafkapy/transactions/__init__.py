"""Kafka's transaction coordinator: transactional producers, markers and __transaction_state."""
