package logstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// alreadyDecided adds to a refused decision who made the one that stands.
func alreadyDecided(tx *bolt.Tx, id uint64, err error) error {
	a, aerr := getApproval(tx, id)
	if aerr != nil || a == nil {
		return err
	}
	switch a.Outcome {
	case ApprovalApproved, ApprovalRejected:
		return fmt.Errorf("%w (effect %d was already %s by %s)", err, id, a.Outcome, a.DecidedBy)
	case ApprovalTimedOut:
		return fmt.Errorf("%w (effect %d's approval request timed out)", err, id)
	}
	return err
}
