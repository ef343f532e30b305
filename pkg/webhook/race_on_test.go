//go:build race

package webhook

const raceEnabled = true
