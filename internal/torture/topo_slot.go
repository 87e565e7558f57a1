package torture

import "strings"

// keySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// key, or of the first non-empty {...} section in it, modulo 16384. The
// cluster faults use it to know which workload names a node serves without
// asking a node that may be down.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % 16384
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), bit by bit.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
