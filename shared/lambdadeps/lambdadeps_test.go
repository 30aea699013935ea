package lambdadeps_test

import (
	"testing"

	"github.com/agentharness/harness/shared/lambdadeps"
)

func TestMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name      string
		env       map[string]string
		wantLimit int64
		wantOK    bool
	}{
		{"512 MB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 384 << 20, true},
		{"10 GB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240"}, 7680 << 20, true},
		{"the operator's GOMEMLIMIT wins", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "100MiB"}, 0, false},
		{"outside Lambda", map[string]string{}, 0, false},
		{"not a number", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			limit, ok := lambdadeps.MemoryLimit(func(k string) string { return tt.env[k] })
			if limit != tt.wantLimit || ok != tt.wantOK {
				t.Errorf("MemoryLimit = %d, %v; want %d, %v", limit, ok, tt.wantLimit, tt.wantOK)
			}
		})
	}
}

func TestProcs(t *testing.T) {
	for _, tt := range []struct {
		name      string
		env       map[string]string
		wantProcs int
		wantOK    bool
	}{
		{"512 MB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 1, true},
		{"one vCPU", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}, 1, true},
		{"just under two vCPUs", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3537"}, 1, true},
		{"10 GB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240"}, 5, true},
		{"the operator's GOMAXPROCS wins", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMAXPROCS": "4"}, 0, false},
		{"outside Lambda", map[string]string{}, 0, false},
		{"not a number", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			procs, ok := lambdadeps.Procs(func(k string) string { return tt.env[k] })
			if procs != tt.wantProcs || ok != tt.wantOK {
				t.Errorf("Procs = %d, %v; want %d, %v", procs, ok, tt.wantProcs, tt.wantOK)
			}
		})
	}
}
