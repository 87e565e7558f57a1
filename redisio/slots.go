package redisio

import "strings"

// Cluster hash slots, computed here as Redis does (CRC16/XMODEM of the hash
// tag, mod 16384), so the batcher can tell which calls of a pipeline share
// a slot, and so must keep their order, without asking anyone.

const slotCount = 16384

var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// SlotOf is key's Cluster hash slot: of its {hash tag} when it has a
// non-empty one, else of the whole key.
func SlotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return int(crc) % slotCount
}
