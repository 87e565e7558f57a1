//go:build !brokenrelay

package actors

// relayChecked says relays keep their conditions (see relays). A build
// with the brokenrelay tag drops them: the torture suite must then find
// holds relayed after Redis let them go (see CONTRIBUTING.md).
const relayChecked = true
