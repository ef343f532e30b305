package apiserver

import "testing"

func TestNamePrefix(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{name: "plain", in: "TestObjects", want: "testobjects-"},
		{name: "subtest", in: "TestDNS/A_record (ipv4)", want: "testdns-a-record-ipv4-"},
		{name: "leading digit", in: "1st", want: "t1st-"},
		{name: "empty", in: "", want: "t-"},
		{name: "long", in: "TestAVeryLongNameThatGoesOnAndOnBeyondFortyCharacters", want: "testaverylongnamethatgoesonandonbeyondfo-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := namePrefix(tt.in); got != tt.want {
				t.Errorf("namePrefix(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBinDirEnv(t *testing.T) {
	t.Setenv(EnvBinDir, t.TempDir())
	if _, err := BinDir(); err == nil {
		t.Fatal("BinDir found binaries in an empty directory")
	}
}
