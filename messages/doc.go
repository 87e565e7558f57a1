// Package messages holds what travels between caller goroutines and the lock
// actors: small structs, one per request or event, and the reply types.
//
// A caller never shares memory with an actor except through these messages and
// the Request it carries. Messages hold no behaviour beyond their once-only
// answers: the Request's answer-or-abandon handshake and Release.Answer.
//
// It is part of lockactor's implementation, not an API: its exported names
// serve packages actors and lockactor only and may change in any release.
package messages
