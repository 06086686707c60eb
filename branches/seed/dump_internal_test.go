package seed

import (
	"slices"
	"testing"
)

func TestScriptRoles(t *testing.T) {
	script := `--
-- Name: shop; Type: DATABASE; Schema: -; Owner: shop_owner
--
CREATE DATABASE shop WITH TEMPLATE = template0 ENCODING = 'UTF8';
ALTER DATABASE shop OWNER TO shop_owner;
\connect shop
ALTER FUNCTION public.f(a integer, "to" text) OWNER TO "Mary Smith";
CREATE FUNCTION public.g() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
GRANT SELECT ON t TO in_a_body;
END$$;
ALTER TABLE public."my table OWNER TO x" OWNER TO Crm_Owner;
CREATE POLICY p ON public.t TO "Mary Smith", reader USING ((id > 0));
GRANT CONNECT ON DATABASE shop TO reader;
GRANT SELECT ON TABLE public.t TO PUBLIC, "we""ird" WITH GRANT OPTION;
GRANT SELECT ON TABLE public.u TO auditor GRANTED BY grantor;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
REVOKE ALL ON TABLE public.v FROM revoked;
ALTER DEFAULT PRIVILEGES FOR ROLE shop_owner IN SCHEMA public GRANT SELECT ON TABLES  TO "default reader";
GRANT SELECT ON TABLE public.w TO cascade;
REVOKE ALL ON TABLE public.w FROM restrict CASCADE;
GRANT SELECT (a, b) ON TABLE public.w TO colr, "a,b";
ALTER DEFAULT PRIVILEGES FOR ROLE defpriv_owner IN SCHEMA public GRANT SELECT ON TABLES TO role;
CREATE USER MAPPING FOR mapped SERVER s OPTIONS (user 'x');
CREATE USER MAPPING FOR PUBLIC SERVER s;
CREATE POLICY q ON public.w AS RESTRICTIVE FOR SELECT TO pol_r USING ((a > 0));
COMMENT ON TABLE public.t IS 'GRANT SELECT ON t TO in_a_comment;
ALTER TABLE t OWNER TO in_a_comment;';
`
	roles, dbOwner, err := scriptRoles([]byte(script))
	want := []string{"shop_owner", "Mary Smith", "crm_owner", "reader", `we"ird`, "auditor", "grantor", "revoked", "default reader",
		"cascade", "restrict", "colr", "a,b", "defpriv_owner", "role", "mapped", "pol_r"}
	if err != nil || dbOwner != "shop_owner" || !slices.Equal(roles, want) {
		t.Errorf("scriptRoles: %q, database owner %q\nwant %q", roles, dbOwner, want)
	}
}
