// The login flood of `make bench` (tests/bench_secured_door.py): failed SASL/PLAIN logins against one
// listener at a steady rate, each on a connection of its own that the door answers after Kafka's
// connection.failed.authentication.delay.ms and closes. Written in Go so that the attacker, which must
// share this machine's cores with the door, costs as little CPU as it can.
//
// Usage: login_flood HOST:PORT RATE MAX_IN_FLIGHT [SOURCE_IP]; runs until a line arrives on stdin, then prints
// "<attempted> <refused> <unanswered>" (refused: a SaslAuthenticate response carrying an error, then the close;
// unanswered: closed before any answer, as a door or broker closes a connection over its IP's KIP-612 quota).
// SOURCE_IP: the local address to connect from (e.g. 127.0.0.2: one flooding host, apart from the others).
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
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

type outcome int

const (
	failed outcome = iota
	refused
	unanswered
)

// attempt: one failed login: refused when the door answered SaslAuthenticate with an error and closed,
// unanswered when it closed the connection before answering anything.
func attempt(dialer *net.Dialer, address string, payload []byte) outcome {
	conn, err := dialer.Dial("tcp", address)
	if err != nil {
		return failed
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(payload); err != nil {
		return failed
	}
	var size [4]byte
	for i := 0; i < 2; i++ { // the handshake's answer, then the authenticate's
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			if i == 0 && (err == io.EOF || isReset(err)) {
				return unanswered
			}
			return failed
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil {
			return failed
		}
		// SaslAuthenticate v0 response: correlation id (4), error code (2)
		if i == 1 && (len(body) < 6 || binary.BigEndian.Uint16(body[4:6]) == 0) {
			return failed
		}
	}
	if _, err = conn.Read(size[:1]); err == io.EOF { // the door closes the connection after the failure
		return refused
	}
	return failed
}

func isReset(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && errors.Is(opErr.Err, syscall.ECONNRESET)
}

func main() {
	if len(os.Args) != 4 && len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: login_flood HOST:PORT RATE MAX_IN_FLIGHT [SOURCE_IP]")
		os.Exit(2)
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if len(os.Args) == 5 {
		source := net.ParseIP(os.Args[4])
		if source == nil {
			fmt.Fprintln(os.Stderr, "login_flood: SOURCE_IP is not an IP address")
			os.Exit(2)
		}
		dialer.LocalAddr = &net.TCPAddr{IP: source}
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
	var attempted, refusals, closes atomic.Int64
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
				switch attempt(dialer, address, payload) {
				case refused:
					refusals.Add(1)
				case unanswered:
					closes.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	fmt.Println(attempted.Load(), refusals.Load(), closes.Load())
}
