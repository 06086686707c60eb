package seed

import (
	"slices"
	"testing"
)

func TestTocOwners(t *testing.T) {
	list := `;
; Archive created at 2026-12-02 18:00:00 UTC
;     dbname: shop
;
3375; 1262 16384 DATABASE - shop shop_owner
5; 2615 16385 SCHEMA - sales shop_owner
215; 1259 16386 TABLE sales customers crm_owner
3376; 0 0 ACL - SCHEMA sales shop_owner
220; 1255 16390 FUNCTION public f() -
`
	owners, dbOwner := tocOwners([]byte(list))
	if dbOwner != "shop_owner" || !slices.Equal(owners, []string{"shop_owner", "crm_owner"}) {
		t.Errorf("tocOwners: %v, database owner %q", owners, dbOwner)
	}
}
