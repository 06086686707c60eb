package seed

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// dropSlots drops the replication slots a copied data directory brought (a
// standby's physical slot, a CDC tool's logical one). Their consumers never
// connect to a seed or a branch, and every branch would keep all WAL from the
// slot's restart point, and for a logical slot the catalog's dead rows, for
// good.
func (s *server) dropSlots(ctx context.Context, superuser string, progress func(string)) error {
	c, err := s.connect(ctx, superuser, "template1")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, "SELECT slot_name, slot_type FROM pg_replication_slots ORDER BY slot_name")
	if err != nil {
		return err
	}
	slots, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Type string }])
	if err != nil {
		return err
	}
	for _, sl := range slots {
		progress(fmt.Sprintf("dropping the %s replication slot %q of the copied cluster", sl.Type, sl.Name))
		if _, err := c.Exec(ctx, "SELECT pg_drop_replication_slot($1)", sl.Name); err != nil {
			return fmt.Errorf("drop replication slot %q: %w", sl.Name, err)
		}
	}
	return nil
}
