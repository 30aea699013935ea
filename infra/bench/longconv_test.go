package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
)

func TestWindow(t *testing.T) {
	turns := []turnCost{
		{cpu: 2 * time.Millisecond, latency: 9 * time.Millisecond, reads: 3},
		{cpu: 4 * time.Millisecond, latency: 5 * time.Millisecond, reads: 5, compactions: 1},
		{cpu: 6 * time.Millisecond, latency: 7 * time.Millisecond, reads: 10},
		{cpu: 8 * time.Millisecond, latency: 1 * time.Millisecond, reads: 2, compactions: 1},
	}
	tests := []struct {
		name     string
		from, to int
		want     longWindowStats
	}{
		// Nearest rank: the p50 of four is the second smallest.
		{"all", 1, 4, longWindowStats{from: 1, to: 4, cpuMs: 5, reads: 5, p50Ms: 5, compactions: 2}},
		{"the last two", 3, 4, longWindowStats{from: 3, to: 4, cpuMs: 7, reads: 6, p50Ms: 1, compactions: 1}},
		{"one", 1, 1, longWindowStats{from: 1, to: 1, cpuMs: 2, reads: 3, p50Ms: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := window(turns, tt.from, tt.to)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(longWindowStats{})); diff != "" {
				t.Errorf("window(%d, %d) (-want +got):\n%s", tt.from, tt.to, diff)
			}
		})
	}
}

func TestReadUnits(t *testing.T) {
	s := func(n int) types.AttributeValue { return &types.AttributeValueMemberS{Value: strings.Repeat("x", n)} }
	tests := []struct {
		name  string
		items []map[string]types.AttributeValue
		want  int
	}{
		{"nothing returned still costs a unit", nil, 1},
		{"4 KB exactly", []map[string]types.AttributeValue{{"k": s(4095)}}, 1},
		{"a byte over", []map[string]types.AttributeValue{{"k": s(4096)}}, 2},
		{"items of a page add up before rounding", []map[string]types.AttributeValue{{"k": s(2047)}, {"k": s(2047)}}, 1},
		{"nested map and list", []map[string]types.AttributeValue{{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s(4090)}},
		}}}}, 2}, // 1+3 + 1+3 + 1+4090 bytes
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readUnits(tt.items); got != tt.want {
				t.Errorf("readUnits() = %d, want %d", got, tt.want)
			}
		})
	}
}
