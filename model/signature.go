package model

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/undolog/undolog/internal/canonjson"
)

// signatureVersion tags the signature layout, so a future change cannot
// collide with signatures already in a log.
const signatureVersion = "undolog-call-v1"

// Signature is the hex SHA-256 over the length-prefixed tuple (version,
// session, tool, canonical args, key). canonicalArgs must be RFC 8785 output.
func Signature(session, tool string, canonicalArgs []byte, key string) string {
	return FieldsHash(signatureVersion, session, tool, string(canonicalArgs), key)
}

// CanonicalArgs validates JSON args and returns their canonical form; empty
// args mean {}.
func CanonicalArgs(args []byte) ([]byte, error) {
	if len(args) == 0 {
		return []byte("{}"), nil
	}
	out, err := canonjson.Canonicalize(args)
	if err != nil {
		return nil, fmt.Errorf("%w: args: %v", ErrInvalidInput, err)
	}
	return out, nil
}

// FieldsHash is the hex SHA-256 of the fields, each preceded by its length
// as 8 big-endian bytes, so that no two lists of fields hash alike.
func FieldsHash(fields ...string) string {
	var space [512]byte
	b := space[:0]
	for _, f := range fields {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
