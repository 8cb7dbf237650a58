package etcd

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"go.uber.org/zap"
)

func TestLoggerForwardsWarningsAndErrorsToLogrus(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.InfoLevel)
	lg := newLogger(log, &atomic.Bool{}).With(zap.String("member", "kelp"))
	lg.Info("applied entry")
	lg.Debug("raft tick")
	lg.Warn("slow fdatasync", zap.Duration("took", 2e9))
	lg.Error("failed to create WAL", zap.Error(errors.New("no space left on device")))
	entries := hook.AllEntries()
	if len(entries) != 2 {
		t.Fatalf("got %d entries, want the warning and the error only: %v", len(entries), entries)
	}
	w, e := entries[0], entries[1]
	if w.Level != logrus.WarnLevel || w.Message != "slow fdatasync" || fmt.Sprint(w.Data["took"]) != "2s" || w.Data["member"] != "kelp" || w.Data["component"] != "etcd" {
		t.Errorf("warning = %v %q %v", w.Level, w.Message, w.Data)
	}
	if e.Level != logrus.ErrorLevel || e.Data["error"] != "no space left on device" {
		t.Errorf("error = %v %q %v", e.Level, e.Message, e.Data)
	}
}

func TestLoggerKeepsInfoInDebugMode(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	newLogger(log, &atomic.Bool{}).Info("applied entry")
	if e := hook.LastEntry(); e == nil || e.Level != logrus.InfoLevel {
		t.Fatalf("info entry in debug mode: %v", e)
	}
}

// A panic is logged before zap panics, so the reason is in kelp's log even
// if the stack trace is lost.
func TestLoggerLogsPanicBeforePanicking(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	log.SetOutput(io.Discard)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("zap did not panic")
			}
		}()
		newLogger(log, &atomic.Bool{}).Panic("failed to create WAL", zap.Error(errors.New("no space left on device")))
	}()
	e := hook.LastEntry()
	if e == nil || e.Level != logrus.ErrorLevel || e.Message != "fatal: failed to create WAL" || e.Data["error"] != "no space left on device" {
		t.Fatalf("entry = %v", e)
	}
}

// Once the member is being closed, its listeners' errors are expected.
func TestLoggerQuietWhileClosing(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	closing := &atomic.Bool{}
	lg := newLogger(log, closing)
	closing.Store(true)
	lg.Error("setting up serving from embedded etcd failed.")
	if len(hook.AllEntries()) != 0 {
		t.Fatalf("logged while closing: %v", hook.AllEntries())
	}
}
