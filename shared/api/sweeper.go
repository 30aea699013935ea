package api

import (
	"context"
	"errors"
)

// Sweeper is the scheduled recovery of async tool calls and dispatch groups.
type Sweeper struct{}

// NewSweeper wires the sweeper from d.
func NewSweeper(d Deps) (*Sweeper, error) {
	return nil, errors.New("sweeper is not built yet")
}

// Run sweeps once.
func (s *Sweeper) Run(ctx context.Context) error { return errors.New("not built yet") }
