"""Security: SASL mechanisms, TLS contexts, principals and the ACL authorizer."""
