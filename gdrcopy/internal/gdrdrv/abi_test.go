package gdrdrv

import (
	"math"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// ioc mirrors the kernel's _IOC(dir, type, nr, size) on amd64 and arm64
// (include/uapi/asm-generic/ioctl.h): dir<<30 | size<<16 | type<<8 | nr.
func ioc(dir, typ, nr, size uint32) uint32 {
	return dir<<30 | size<<16 | typ<<8 | nr
}

const iocReadWrite = 3 // _IOC_READ | _IOC_WRITE

func TestCommandValues(t *testing.T) {
	// Values and encoded sizes from gdrdrv.h, as tabulated in the reference
	// (gdrdrv-abi.md §1.2). The encoded size is 8 (a pointer) for the six
	// commands whose macro passes a pointer type.
	tests := []struct {
		name        string
		got         uint32
		want        uint32
		nr, encSize uint32
	}{
		{"PIN_BUFFER", IocPinBuffer, 0xC028DA01, 1, 40},
		{"UNPIN_BUFFER", IocUnpinBuffer, 0xC008DA02, 2, 8},
		{"GET_CB_FLAG", IocGetCBFlag, 0xC008DA03, 3, 8},
		{"GET_INFO", IocGetInfo, 0xC008DA04, 4, 8},
		{"GET_INFO_V2", IocGetInfoV2, 0xC008DA05, 5, 8},
		{"GET_ATTR", IocGetAttr, 0xC008DA06, 6, 8},
		{"PIN_BUFFER_V2", IocPinBufferV2, 0xC020DA07, 7, 32},
		{"REQ_MAPPING_TYPE", IocReqMappingType, 0xC008DA08, 8, 8},
		{"GET_VERSION", IocGetVersion, 0xC008DAFF, 255, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("command = %#x, want %#x", tt.got, tt.want)
			}
			if enc := ioc(iocReadWrite, IoctlType, tt.nr, tt.encSize); enc != tt.want {
				t.Errorf("_IOWR(0xDA, %d, size %d) = %#x, want %#x", tt.nr, tt.encSize, enc, tt.want)
			}
		})
	}
}

type field struct {
	Name   string
	Offset uintptr
	Size   uintptr
}

type layout struct {
	Size   uintptr
	Align  uintptr
	Fields []field
}

func TestStructLayouts(t *testing.T) {
	// Sizes and offsets from gdrdrv.h on x86-64 and arm64 (gdrdrv-abi.md
	// §1.3). Padding is not listed: only the named C fields are.
	var (
		pin   PinBufferParams
		unpin UnpinBufferParams
		cb    GetCBFlagParams
		info  GetInfoParams
		info2 GetInfoV2Params
		attr  GetAttrParams
		pin2  PinBufferV2Params
		req   ReqMappingTypeParams
		ver   GetVersionParams
	)
	f := func(name string, off, size uintptr) field { return field{name, off, size} }
	tests := []struct {
		name      string
		got, want layout
	}{
		{"PIN_BUFFER_PARAMS", layout{unsafe.Sizeof(pin), unsafe.Alignof(pin), []field{
			f("addr", unsafe.Offsetof(pin.Addr), unsafe.Sizeof(pin.Addr)),
			f("size", unsafe.Offsetof(pin.Size), unsafe.Sizeof(pin.Size)),
			f("p2p_token", unsafe.Offsetof(pin.P2PToken), unsafe.Sizeof(pin.P2PToken)),
			f("va_space", unsafe.Offsetof(pin.VASpace), unsafe.Sizeof(pin.VASpace)),
			f("handle", unsafe.Offsetof(pin.Handle), unsafe.Sizeof(pin.Handle)),
		}}, layout{40, 8, []field{
			f("addr", 0, 8), f("size", 8, 8), f("p2p_token", 16, 8), f("va_space", 24, 4), f("handle", 32, 8),
		}}},
		{"UNPIN_BUFFER_PARAMS", layout{unsafe.Sizeof(unpin), unsafe.Alignof(unpin), []field{
			f("handle", unsafe.Offsetof(unpin.Handle), unsafe.Sizeof(unpin.Handle)),
		}}, layout{8, 8, []field{f("handle", 0, 8)}}},
		{"GET_CB_FLAG_PARAMS", layout{unsafe.Sizeof(cb), unsafe.Alignof(cb), []field{
			f("handle", unsafe.Offsetof(cb.Handle), unsafe.Sizeof(cb.Handle)),
			f("flag", unsafe.Offsetof(cb.Flag), unsafe.Sizeof(cb.Flag)),
		}}, layout{16, 8, []field{f("handle", 0, 8), f("flag", 8, 4)}}},
		{"GET_INFO_PARAMS", layout{unsafe.Sizeof(info), unsafe.Alignof(info), []field{
			f("handle", unsafe.Offsetof(info.Handle), unsafe.Sizeof(info.Handle)),
			f("va", unsafe.Offsetof(info.VA), unsafe.Sizeof(info.VA)),
			f("mapped_size", unsafe.Offsetof(info.MappedSize), unsafe.Sizeof(info.MappedSize)),
			f("page_size", unsafe.Offsetof(info.PageSize), unsafe.Sizeof(info.PageSize)),
			f("tsc_khz", unsafe.Offsetof(info.TSCKHz), unsafe.Sizeof(info.TSCKHz)),
			f("tm_cycles", unsafe.Offsetof(info.TMCycles), unsafe.Sizeof(info.TMCycles)),
			f("mapped", unsafe.Offsetof(info.Mapped), unsafe.Sizeof(info.Mapped)),
			f("wc_mapping", unsafe.Offsetof(info.WCMapping), unsafe.Sizeof(info.WCMapping)),
		}}, layout{48, 8, []field{
			f("handle", 0, 8), f("va", 8, 8), f("mapped_size", 16, 8), f("page_size", 24, 4),
			f("tsc_khz", 28, 4), f("tm_cycles", 32, 8), f("mapped", 40, 4), f("wc_mapping", 44, 4),
		}}},
		{"GET_INFO_V2_PARAMS", layout{unsafe.Sizeof(info2), unsafe.Alignof(info2), []field{
			f("handle", unsafe.Offsetof(info2.Handle), unsafe.Sizeof(info2.Handle)),
			f("va", unsafe.Offsetof(info2.VA), unsafe.Sizeof(info2.VA)),
			f("mapped_size", unsafe.Offsetof(info2.MappedSize), unsafe.Sizeof(info2.MappedSize)),
			f("page_size", unsafe.Offsetof(info2.PageSize), unsafe.Sizeof(info2.PageSize)),
			f("tsc_khz", unsafe.Offsetof(info2.TSCKHz), unsafe.Sizeof(info2.TSCKHz)),
			f("tm_cycles", unsafe.Offsetof(info2.TMCycles), unsafe.Sizeof(info2.TMCycles)),
			f("mapping_type", unsafe.Offsetof(info2.MappingType), unsafe.Sizeof(info2.MappingType)),
		}}, layout{48, 8, []field{
			f("handle", 0, 8), f("va", 8, 8), f("mapped_size", 16, 8), f("page_size", 24, 4),
			f("tsc_khz", 28, 4), f("tm_cycles", 32, 8), f("mapping_type", 40, 4),
		}}},
		{"GET_ATTR_PARAMS", layout{unsafe.Sizeof(attr), unsafe.Alignof(attr), []field{
			f("attr", unsafe.Offsetof(attr.Attr), unsafe.Sizeof(attr.Attr)),
			f("val", unsafe.Offsetof(attr.Val), unsafe.Sizeof(attr.Val)),
		}}, layout{8, 4, []field{f("attr", 0, 4), f("val", 4, 4)}}},
		{"PIN_BUFFER_V2_PARAMS", layout{unsafe.Sizeof(pin2), unsafe.Alignof(pin2), []field{
			f("addr", unsafe.Offsetof(pin2.Addr), unsafe.Sizeof(pin2.Addr)),
			f("size", unsafe.Offsetof(pin2.Size), unsafe.Sizeof(pin2.Size)),
			f("flags", unsafe.Offsetof(pin2.Flags), unsafe.Sizeof(pin2.Flags)),
			f("pad", unsafe.Offsetof(pin2.Pad), unsafe.Sizeof(pin2.Pad)),
			f("handle", unsafe.Offsetof(pin2.Handle), unsafe.Sizeof(pin2.Handle)),
		}}, layout{32, 8, []field{
			f("addr", 0, 8), f("size", 8, 8), f("flags", 16, 4), f("pad", 20, 4), f("handle", 24, 8),
		}}},
		{"REQ_MAPPING_TYPE_PARAMS", layout{unsafe.Sizeof(req), unsafe.Alignof(req), []field{
			f("handle", unsafe.Offsetof(req.Handle), unsafe.Sizeof(req.Handle)),
			f("mapping_type", unsafe.Offsetof(req.MappingType), unsafe.Sizeof(req.MappingType)),
		}}, layout{16, 8, []field{f("handle", 0, 8), f("mapping_type", 8, 4)}}},
		{"GET_VERSION_PARAMS", layout{unsafe.Sizeof(ver), unsafe.Alignof(ver), []field{
			f("gdrdrv_version", unsafe.Offsetof(ver.DriverVersion), unsafe.Sizeof(ver.DriverVersion)),
			f("minimum_gdr_api_version", unsafe.Offsetof(ver.MinimumAPIVersion), unsafe.Sizeof(ver.MinimumAPIVersion)),
		}}, layout{8, 4, []field{f("gdrdrv_version", 0, 4), f("minimum_gdr_api_version", 4, 4)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("layout mismatch (-gdrdrv.h +Go):\n%s", diff)
			}
		})
	}
}

func TestConstants(t *testing.T) {
	got := map[string]uint64{
		"GDRDRV_VERSION":                               uint64(DriverVersion),
		"MINIMUM_GDR_API_VERSION":                      uint64(MinimumAPIVersion),
		"GDR_API_VERSION":                              uint64(APIVersion),
		"MINIMUM_GDRDRV_VERSION":                       uint64(MinimumDriverVersion),
		"GDRDRV_MINIMUM_VERSION_WITH_GET_INFO_V2":      uint64(MinimumVersionWithGetInfoV2),
		"GDRDRV_MINIMUM_VERSION_WITH_GET_ATTR":         uint64(MinimumVersionWithGetAttr),
		"GDRDRV_MINIMUM_VERSION_WITH_PIN_BUFFER_V2":    uint64(MinimumVersionWithPinBufferV2),
		"GDRDRV_MINIMUM_VERSION_WITH_REQ_MAPPING_TYPE": uint64(MinimumVersionWithReqMappingType),
		"GPU_PAGE_SHIFT":                               GPUPageShift,
		"GPU_PAGE_SIZE":                                GPUPageSize,
		"GPU_PAGE_OFFSET":                              GPUPageOffset,
		"GPU_PAGE_MASK":                                GPUPageMask,
		"GDR_MR_NONE":                                  uint64(MRNone),
		"GDR_MR_WC":                                    uint64(MRWC),
		"GDR_MR_CACHING":                               uint64(MRCaching),
		"GDR_MR_DEVICE":                                uint64(MRDevice),
		"GDRDRV_ATTR_USE_PERSISTENT_MAPPING":           uint64(AttrUsePersistentMapping),
		"GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE":      uint64(AttrSupportPinFlagForcePCIe),
		"GDRDRV_PIN_BUFFER_FLAG_DEFAULT":               uint64(PinFlagDefault),
		"GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE":            uint64(PinFlagForcePCIe),
		"GDRDRV_IOCTL":                                 IoctlType,
	}
	want := map[string]uint64{
		"GDRDRV_VERSION":                               0x00020006,
		"MINIMUM_GDR_API_VERSION":                      0x00020000,
		"GDR_API_VERSION":                              0x00020006,
		"MINIMUM_GDRDRV_VERSION":                       0x00020000,
		"GDRDRV_MINIMUM_VERSION_WITH_GET_INFO_V2":      0x00020004,
		"GDRDRV_MINIMUM_VERSION_WITH_GET_ATTR":         0x00020005,
		"GDRDRV_MINIMUM_VERSION_WITH_PIN_BUFFER_V2":    0x00020005,
		"GDRDRV_MINIMUM_VERSION_WITH_REQ_MAPPING_TYPE": 0x00020005,
		"GPU_PAGE_SHIFT":                               16,
		"GPU_PAGE_SIZE":                                65536,
		"GPU_PAGE_OFFSET":                              0xFFFF,
		"GPU_PAGE_MASK":                                0xFFFFFFFFFFFF0000,
		"GDR_MR_NONE":                                  0,
		"GDR_MR_WC":                                    1,
		"GDR_MR_CACHING":                               2,
		"GDR_MR_DEVICE":                                3,
		"GDRDRV_ATTR_USE_PERSISTENT_MAPPING":           1,
		"GDRDRV_ATTR_SUPPORT_PIN_FLAG_FORCE_PCIE":      2,
		"GDRDRV_PIN_BUFFER_FLAG_DEFAULT":               0,
		"GDRDRV_PIN_BUFFER_FLAG_FORCE_PCIE":            1,
		"GDRDRV_IOCTL":                                 0xDA,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constants differ from gdrdrv.h/gdrapi.h (-want +got):\n%s", diff)
	}
}

func TestHandleOffset(t *testing.T) {
	tests := []struct {
		name     string
		handle   uint64
		pageSize int
		want     int64
		wantErr  bool
	}{
		{"first handle", 0, 4096, 0, false},
		{"after a 64 KiB pin, 4 KiB pages", 16, 4096, 16 << 12, false},
		{"64 KiB host pages", 1, 65536, 1 << 16, false},
		{"largest", math.MaxInt64 >> 12, 4096, math.MaxInt64 &^ 0xFFF, false},
		{"overflow", math.MaxInt64>>12 + 1, 4096, 0, true},
		{"overflow 64 KiB pages", 1 << 47, 65536, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := HandleOffset(tt.handle, tt.pageSize)
			if (err != nil) != tt.wantErr {
				t.Fatalf("HandleOffset(%#x, %d) error = %v, want error %t", tt.handle, tt.pageSize, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("HandleOffset(%#x, %d) = %#x, want %#x", tt.handle, tt.pageSize, got, tt.want)
			}
		})
	}
}

func TestPageShift(t *testing.T) {
	got := map[int]uint{}
	for _, ps := range []int{4096, 16384, 65536} {
		got[ps] = PageShift(ps)
	}
	want := map[int]uint{4096: 12, 16384: 14, 65536: 16}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PageShift (-want +got):\n%s", diff)
	}
}
