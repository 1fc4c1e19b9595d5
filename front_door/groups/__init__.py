"""The front door's classic consumer-group coordinator: group state, its durable records, and where each group is coordinated."""
