//go:build race

package lockactor_test

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = true
