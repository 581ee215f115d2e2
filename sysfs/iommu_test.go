package sysfs

import (
	"encoding/json"
	"testing"
)

func TestIOMMUDomainTypeNames(t *testing.T) {
	got, err := json.Marshal([]IOMMUDomainType{IOMMUUnknown, IOMMUBlocked, IOMMUIdentity, IOMMUUnmanaged, IOMMUDMA, IOMMUDMAFQ})
	if err != nil {
		t.Fatal(err)
	}
	if want := `["unknown","blocked","identity","unmanaged","DMA","DMA-FQ"]`; string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	if s := IOMMUDomainType(9).String(); s != "IOMMUDomainType(9)" {
		t.Errorf("out-of-range type = %q", s)
	}
	if s := IOMMUNotRead.String(); s != "not read" {
		t.Errorf("IOMMUNotRead = %q", s)
	}
	if typ, err := parseIOMMUDomainType([]byte("not read\n")); err == nil {
		t.Errorf("a type file saying %q parses as %v", "not read", typ)
	}
}
