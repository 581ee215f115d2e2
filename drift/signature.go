package drift

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// signatureScheme starts what is hashed: a change of what a Summary holds or of
// how it is written changes it, so that signatures of different schemes never
// compare equal by accident.
const signatureScheme = "p2pcheck fabric signature v1"

// Signature is a stable hash of a Summary's compared facts: every device's place,
// role and facts, the node's facts and every pair's verdicts. Two machines with
// the same signature have no drift between them (unless SHA-256 collides); what
// never counts (see the package comment) is not hashed, nor are the display-only
// fields (addresses, labels) or the reason given for an unknown fact.
type Signature [sha256.Size]byte

// String returns the first 16 hexadecimal digits, the form p2pcheck prints and
// labels metrics with.
func (g Signature) String() string { return hex.EncodeToString(g[:8]) }

// Signature computes s's signature.
func (s *Summary) Signature() Signature {
	h := &hasher{h: sha256.New()}
	h.str(signatureScheme)
	h.num(len(s.Devices))
	for i := range s.Devices {
		d := &s.Devices[i]
		h.str(d.Place)
		h.str(string(d.Role))
		h.facts(d.Facts)
	}
	h.facts(s.Facts)
	h.num(len(s.Interest))
	for _, i := range s.Interest {
		h.str(s.Devices[i].Place)
	}
	h.str(s.PairsNote)
	h.num(len(s.pairs))
	for _, p := range s.pairs {
		h.num(int(p.mapType))
		h.num(int(p.distance))
		h.num(int(p.nvsmi))
		h.num(int(p.nvlinks))
		h.num(int(p.nccl))
		h.str(s.transportText(p))
	}
	var g Signature
	h.h.Sum(g[:0])
	return g
}

// hasher writes values unambiguously: every string with its length.
type hasher struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (h *hasher) num(n int) {
	k := binary.PutVarint(h.buf[:], int64(n))
	h.h.Write(h.buf[:k])
}

func (h *hasher) str(s string) {
	h.num(len(s))
	h.h.Write([]byte(s))
}

func (h *hasher) facts(fs []Fact) {
	h.num(len(fs))
	for _, f := range fs {
		h.str(string(f.Kind))
		h.str(f.Name)
		if f.Known {
			h.num(1)
			h.str(f.Value)
		} else {
			h.num(0)
		}
	}
}
