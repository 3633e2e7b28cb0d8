"""Client quotas by (user, client-id): Kafka's ClientQuotaManager family, measured per broker."""
