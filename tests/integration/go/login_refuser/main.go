// The least a server can do to answer `make bench`'s login flood (tests/bench_secured_door.py): canned
// answers, no parsing beyond the frame sizes and correlation ids. Each connection's SaslHandshake is answered
// at once (PLAIN enabled), its SaslAuthenticate after Kafka's 100 ms connection.failed.authentication.delay.ms
// with SASL_AUTHENTICATION_FAILED, then the connection is closed — what the door and Kafka do, at the cost of a
// goroutine. The bench aims the same flood at it to measure what the flood costs a producer on a machine whose
// cores the attacker shares, whatever answers it.
//
// Usage: login_refuser HOST:PORT; prints its bound address on stdout, serves until killed.
package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

const failedAuthenticationDelay = 100 * time.Millisecond

var (
	// SaslHandshake v1 response body: error_code 0, mechanisms ["PLAIN"]
	handshakeBody = []byte{0, 0, 0, 0, 0, 1, 0, 5, 'P', 'L', 'A', 'I', 'N'}
	// SaslAuthenticate v0 response body: error_code 58 (SASL_AUTHENTICATION_FAILED), Kafka's message, no bytes
	authenticateBody = func() []byte {
		message := []byte("Authentication failed: Invalid username or password")
		b := binary.BigEndian.AppendUint16(nil, 58)
		b = binary.BigEndian.AppendUint16(b, uint16(len(message)))
		b = append(b, message...)
		return binary.BigEndian.AppendUint32(b, 0)
	}()
)

func answer(conn net.Conn, correlationID uint32, body []byte) error {
	out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
	out = binary.BigEndian.AppendUint32(out, correlationID)
	_, err := conn.Write(append(out, body...))
	return err
}

// request: the next request's correlation id (its body is not read further).
func request(conn net.Conn) (uint32, error) {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 8 || n > 1<<16 {
		return 0, fmt.Errorf("a request of %d bytes", n)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(conn, frame); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(frame[4:8]), nil
}

func serve(conn net.Conn) {
	defer conn.Close()
	handshake, err := request(conn)
	if err != nil || answer(conn, handshake, handshakeBody) != nil {
		return
	}
	authenticate, err := request(conn)
	if err != nil {
		return
	}
	time.Sleep(failedAuthenticationDelay)
	_ = answer(conn, authenticate, authenticateBody)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: login_refuser HOST:PORT")
		os.Exit(2)
	}
	listener, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "login_refuser:", err)
		os.Exit(1)
	}
	fmt.Println(listener.Addr())
	for {
		conn, err := listener.Accept()
		if err != nil {
			continue
		}
		go serve(conn)
	}
}
