//go:build race

package handlers_test

// raceDetector says the tests run with -race, which makes every request
// several times slower: tests of latency under load scale their load down.
const raceDetector = true
