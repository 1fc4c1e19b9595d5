"""The front door's network layer (Kafka's `SocketServer`): listening sockets, frames, requests and
responses on the wire, connection caps and quotas, the bytes a connection may have in flight."""
