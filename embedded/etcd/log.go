package etcd

import (
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logrusCore is a zap core that hands etcd's log entries to logrus, so a
// storage failure (a WAL that cannot be written, a database that cannot
// grow) is in kelp's own log before etcd panics or exits, never silent.
// Entries below min are dropped before they are encoded: etcd logs every
// request at info and debug.
type logrusCore struct {
	min    zapcore.Level
	fields logrus.Fields
	log    *logrus.Logger
	// closing is set by Close: etcd's listeners then fail with "use of
	// closed network connection" at error level, which is no failure, so
	// from then on everything is logged at debug level.
	closing *atomic.Bool
}

// newLogger is etcd's logger: warnings and above, or info and above when
// kelp logs at debug level.
func newLogger(log *logrus.Logger, closing *atomic.Bool) *zap.Logger {
	min := zapcore.WarnLevel
	if log.IsLevelEnabled(logrus.DebugLevel) {
		min = zapcore.InfoLevel
	}
	return zap.New(&logrusCore{min: min, fields: logrus.Fields{"component": "etcd"}, log: log, closing: closing})
}

func (c *logrusCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *logrusCore) With(fields []zapcore.Field) zapcore.Core {
	out := &logrusCore{min: c.min, fields: make(logrus.Fields, len(c.fields)+len(fields)), log: c.log, closing: c.closing}
	for k, v := range c.fields {
		out.fields[k] = v
	}
	addFields(out.fields, fields)
	return out
}

func (c *logrusCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write logs at the matching logrus level, except that etcd's panics and
// fatal errors are logged at error level: zap itself panics or exits after
// Write, and logrus must not exit first (a logrus Fatal would skip zap's
// own handling, and a logrus Panic would panic twice).
func (c *logrusCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	all := make(logrus.Fields, len(c.fields)+len(fields))
	for k, v := range c.fields {
		all[k] = v
	}
	addFields(all, fields)
	msg := e.Message
	if e.Level >= zapcore.DPanicLevel {
		msg = "fatal: " + msg
	}
	level := logrusLevel(e.Level)
	if (c.closing.Load() || benign[e.Message]) && e.Level < zapcore.DPanicLevel {
		level = logrus.DebugLevel
	}
	c.log.WithFields(all).Log(level, msg)
	return nil
}

func (c *logrusCore) Sync() error { return nil }

// benign are etcd's warnings (and one error) that every start of kelp's
// member logs, though nothing is wrong: kelp's setup choices and a first
// start's transient. At debug level they would otherwise bury the warning
// that matters.
var benign = map[string]bool{
	// simple tokens: the member has no auth; only kelp's in-process client reaches it
	"simple token is not cryptographically signed": true,
	// the unix-socket client listener serves gRPC and HTTP at once
	"Running http and grpc server on single port. This is not recommended for production.": true,
	// a first start, before the first raft entry is applied
	"Failed to detect schema version":  true,
	"failed to update storage version": true,
}

func logrusLevel(l zapcore.Level) logrus.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return logrus.DebugLevel
	case l == zapcore.InfoLevel:
		return logrus.InfoLevel
	case l == zapcore.WarnLevel:
		return logrus.WarnLevel
	default:
		return logrus.ErrorLevel
	}
}

// addFields encodes zap fields (errors, durations, nested objects) the way
// zap's own encoders would, into logrus fields.
func addFields(dst logrus.Fields, fields []zapcore.Field) {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	for k, v := range enc.Fields {
		dst[k] = v
	}
}
