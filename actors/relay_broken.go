//go:build brokenrelay

package actors

// relayChecked is false in this deliberately broken build: a relay passes
// on any hold, however long ago Redis confirmed it, lost or not.
const relayChecked = false
