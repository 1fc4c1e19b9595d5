// Package jsonlines is how the tests' Go clients speak to the test that runs them: one JSON object per line
// on stdout, each written whole, whichever goroutine writes it; and a line on stdin that tells them to stop.
package jsonlines

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"sync"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

// Emit writes one event as one line.
func Emit(event map[string]any) {
	out.Lock()
	defer out.Unlock()
	_ = out.enc.Encode(event)
}

// StopOn returns a channel closed when stdin carries the line `word` or ends.
func StopOn(word string) <-chan struct{} {
	stop := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() && strings.TrimSpace(scanner.Text()) != word {
		}
		close(stop)
	}()
	return stop
}
