package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigCRMLookup(t *testing.T) {
	token := filepath.Join(t.TempDir(), "crm-token")
	if err := os.WriteFile(token, []byte("s3cret-crm-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("a source's lookup is read from its variables", func(t *testing.T) {
		c, err := loadConfig(env(map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop-eu",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_EU_URL":        "https://crm.example.com/api/orders?external_id={source}:{event_id}",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_EU_TOKEN_FILE": token, "RETRYAUDIT_CRM_LOOKUP_SHOP_EU_REF": "data.0.id",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_EU_HEADERS": "X-Api-Version: 2; Accept-Language: en",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_EU_TIMEOUT": "3s", "RETRYAUDIT_CRM_LOOKUP_SHOP_EU_NOT_FOUND_STATUS": "404"}))
		if err != nil || len(c.CRMLookups) != 1 {
			t.Fatalf("%v %+v", err, c.CRMLookups)
		}
		l := c.CRMLookups[0]
		if l.Source != "shop-eu" || l.Token != "s3cret-crm-token" || l.Found != "data.0.id" || l.Method != "GET" ||
			l.Timeout != 3*time.Second || l.Headers["X-Api-Version"] != "2" || l.MaxBody != 256<<10 ||
			l.NotFoundStatus != 404 {
			t.Errorf("%+v", l)
		}
	})
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"no URL", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id"},
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL: required"},
		{"no reference path", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://crm.example/o"}, "RETRYAUDIT_CRM_LOOKUP_SHOP_REF: required"},
		{"a placeholder in the host", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://{source}.crm.example/o", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id"},
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL: " + `"https://{source}.crm.example/o": placeholders may stand in the path and the query only`},
		{"a timeout too long", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://crm.example/o", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_TIMEOUT": "1m"}, "RETRYAUDIT_CRM_LOOKUP_SHOP_TIMEOUT: 1m0s is not between"},
		{"bad headers", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://crm.example/o", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_HEADERS": "no colon"}, "RETRYAUDIT_CRM_LOOKUP_SHOP_HEADERS: \"no colon\" is not Name: value"},
		{"a not-found status other than 404 or 410", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://crm.example/o", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_NOT_FOUND_STATUS": "200"}, "RETRYAUDIT_CRM_LOOKUP_SHOP_NOT_FOUND_STATUS: must be 404 or 410"},
		{"two sources sharing variables", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop-eu,shop_eu"},
			`"shop-eu" and "shop_eu" share the variables`},
		{"an empty token file", map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://crm.example/o", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_TOKEN_FILE": os.DevNull}, "RETRYAUDIT_CRM_LOOKUP_SHOP_TOKEN_FILE"},
	} {
		t.Run("refused at start: "+tc.name, func(t *testing.T) {
			_, err := loadConfig(env(tc.vars))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("the token is never in an error", func(t *testing.T) {
		_, err := loadConfig(env(map[string]string{"RETRYAUDIT_CRM_LOOKUP": "shop",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_URL": "https://crm.example/o", "RETRYAUDIT_CRM_LOOKUP_SHOP_REF": "id",
			"RETRYAUDIT_CRM_LOOKUP_SHOP_TOKEN": "line\nbreak-s3cret"}))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("%v", err)
		}
	})
}
