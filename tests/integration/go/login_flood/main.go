// The login flood of `make bench` (tests/bench_secured_door.py): failed SASL/PLAIN logins against one
// listener at a steady rate, each on a connection of its own that the door answers after Kafka's
// connection.failed.authentication.delay.ms and closes. Written in Go so that the attacker, which must
// share this machine's cores with the door, costs as little CPU as it can.
//
// Usage: login_flood HOST:PORT RATE MAX_IN_FLIGHT; runs until a line arrives on stdin, then prints
// "<attempted> <refused>" (refused: a SaslAuthenticate response carrying an error, then the close).
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func frame(apiKey, version int16, correlationID int32, body []byte) []byte {
	clientID := []byte("flood")
	header := binary.BigEndian.AppendUint16(nil, uint16(apiKey))
	header = binary.BigEndian.AppendUint16(header, uint16(version))
	header = binary.BigEndian.AppendUint32(header, uint32(correlationID))
	header = binary.BigEndian.AppendUint16(header, uint16(len(clientID)))
	header = append(header, clientID...)
	out := binary.BigEndian.AppendUint32(nil, uint32(len(header)+len(body)))
	return append(append(out, header...), body...)
}

func requests() []byte {
	mechanism := []byte("PLAIN")
	handshake := frame(17, 1, 1, append(binary.BigEndian.AppendUint16(nil, uint16(len(mechanism))), mechanism...))
	token := []byte("\x00flood\x00wrong-password")
	authenticate := frame(36, 0, 2, append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...))
	return append(handshake, authenticate...)
}

// attempt: one failed login; true when the door answered SaslAuthenticate with an error and closed.
func attempt(address string, payload []byte) bool {
	conn, err := net.DialTimeout("tcp", address, 5*time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(payload); err != nil {
		return false
	}
	var size [4]byte
	for i := 0; i < 2; i++ { // the handshake's answer, then the authenticate's
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return false
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			return false
		}
		// SaslAuthenticate v0 response: correlation id (4), error code (2)
		if i == 1 && (len(body) < 6 || binary.BigEndian.Uint16(body[4:6]) == 0) {
			return false
		}
	}
	_, err = conn.Read(size[:1]) // the door closes the connection after the failure
	return err == io.EOF
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: login_flood HOST:PORT RATE MAX_IN_FLIGHT")
		os.Exit(2)
	}
	address := os.Args[1]
	rate, err1 := strconv.Atoi(os.Args[2])
	inFlight, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || rate <= 0 || inFlight <= 0 {
		fmt.Fprintln(os.Stderr, "login_flood: RATE and MAX_IN_FLIGHT are positive integers")
		os.Exit(2)
	}
	payload := requests()
	stop := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		close(stop)
	}()
	var attempted, refused atomic.Int64
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	ticker := time.NewTicker(time.Second / time.Duration(rate))
	defer ticker.Stop()
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-ticker.C:
			select {
			case slots <- struct{}{}:
			default:
				continue // every slot busy: this tick's attempt is skipped, not queued
			}
			attempted.Add(1)
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if attempt(address, payload) {
					refused.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	fmt.Println(attempted.Load(), refused.Load())
}
