package server

import (
	"log"
	"strings"

	"github.com/sirupsen/logrus"
)

// logrusErrorLog routes net/http's own error log (TLS handshake failures
// from probing clients, mostly) to logrus at debug level.
func logrusErrorLog() *log.Logger {
	return log.New(writerFunc(func(p []byte) (int, error) {
		logrus.Debug(strings.TrimSpace(string(p)))
		return len(p), nil
	}), "", 0)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
