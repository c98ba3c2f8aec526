package pgstore

import (
	"fmt"
	"strings"

	"github.com/undolog/undolog/storage"
)

// EffectsWhere asks for the ids under every match in one query, its
// conditions ANDed, ordered by id and limited to a page: the planner joins
// the (column, id) indexes, and a page costs what it returns.
func (r reader) EffectsWhere(m []storage.Match, asc bool, cursor uint64, fn func(id uint64) (bool, error)) error {
	if len(m) == 0 {
		return r.Effects(storage.AllEffects, "", asc, cursor, fn)
	}
	var where strings.Builder
	var args []any // $3 on: $1 is the cursor, $2 the page size
	for _, x := range m {
		args = append(args, x.Name)
		n := len(args) + 2
		switch col, ok := indexColumns[x.Index]; {
		case x.Index == storage.ByUndoState:
			// Rows written before schema 6 have no state (NULL): the rules
			// read their entries.
			fmt.Fprintf(&where, " AND e.id IN (SELECT u.effect_id FROM undolog_undo u WHERE u.state = $%d OR u.state IS NULL)", n)
		case x.Index == storage.WithUndo:
			fmt.Fprintf(&where, " AND EXISTS (SELECT 1 FROM undolog_undo u WHERE u.session = $%d AND u.effect_id = e.id)", n)
		case ok:
			fmt.Fprintf(&where, " AND e.%s = $%d", col, n)
		default:
			return fmt.Errorf("no effect index %d", x.Index)
		}
	}
	cmp, order, cursor := direction(asc, cursor)
	query := fmt.Sprintf(`SELECT e.id FROM undolog_effects e WHERE e.id %s $1%s ORDER BY e.id %s LIMIT $2`, cmp, where.String(), order)
	return r.walkIDs(query, cursor, args, fn)
}
