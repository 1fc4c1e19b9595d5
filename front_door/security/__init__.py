"""Who is on the other end of a front-door connection and what they may do: listeners, TLS, SASL, SCRAM
credentials and Kafka's ACLs, one concept per file."""
