// Package logging builds the JSON logger every function writes to CloudWatch with.
package logging

import (
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON logger at level (DEBUG, INFO, WARN or ERROR; anything else means INFO).
func New(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
