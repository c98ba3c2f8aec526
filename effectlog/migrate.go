package effectlog

import (
	"context"
	"fmt"

	"github.com/undolog/undolog/model"
	"github.com/undolog/undolog/storage"
)

// Schema is what Migrate did: the log's schema version before and after,
// and whether the engine migrates on request (a database) or by itself on
// its next write (a log file).
type Schema struct {
	Before   uint64 `json:"before"`
	After    uint64 `json:"after"`
	Migrates bool   `json:"migrates"`
}

// Maintainer is what a Log made by New can do for an operator beyond Log:
// migrate its schema now, and set up the database roles of a shared log.
type Maintainer interface {
	Migrate(ctx context.Context) (Schema, error)
	ApplyRoles(ctx context.Context) error
}

var _ Maintainer = (*Service)(nil)

// Migrate moves the log to this build's schema if its engine migrates on
// request; otherwise it says which version the log has.
func (s *Service) Migrate(ctx context.Context) (Schema, error) {
	if m, ok := s.engine.(storage.Migrator); ok {
		before, after, err := m.Migrate(ctx)
		return Schema{Before: before, After: after, Migrates: true}, err
	}
	var v uint64
	err := s.view(ctx, func(tx storage.ReadTx) error {
		v = tx.SchemaVersion()
		return nil
	})
	return Schema{Before: v, After: v}, err
}

// ApplyRoles creates the engine's database roles and grants them what they
// may do, on an engine that has roles.
func (s *Service) ApplyRoles(ctx context.Context) error {
	r, ok := s.engine.(storage.Roles)
	if !ok {
		return fmt.Errorf("%w: this log has no database roles (a log file is guarded by its file's permissions)", model.ErrInvalidInput)
	}
	return r.ApplyRoles(ctx)
}
