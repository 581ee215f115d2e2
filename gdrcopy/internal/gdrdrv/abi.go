package gdrdrv

import (
	"structs"
)

// Versions are packed as (major << MajorVersionShift) | minor, as in
// gdrdrv.h GDRDRV_VERSION and gdrapi.h GDR_API_VERSION.
const (
	MajorVersionShift = 16
	MinorVersionMask  = 0xFFFF
)

// Version words of GDRCopy 2.6 and the feature gates keyed on the driver
// version (gdrdrv.h, gdrapi.h).
const (
	// DriverVersion is GDRDRV_VERSION, the driver version whose ABI this
	// package mirrors (2.6).
	DriverVersion uint32 = 2<<MajorVersionShift | 6
	// MinimumAPIVersion is MINIMUM_GDR_API_VERSION: the oldest library a
	// 2.6 driver accepts (2.0).
	MinimumAPIVersion uint32 = 2 << MajorVersionShift
	// APIVersion is GDR_API_VERSION of libgdrapi 2.6, the library version a
	// client of this package speaks for.
	APIVersion uint32 = 2<<MajorVersionShift | 6
	// MinimumDriverVersion is gdrapi.h MINIMUM_GDRDRV_VERSION: libgdrapi
	// refuses drivers older than 2.0 (gdrapi.c gdr_open_gdrdrv_internal).
	MinimumDriverVersion uint32 = 2 << MajorVersionShift

	// MinimumVersionWithGetInfoV2 is GDRDRV_MINIMUM_VERSION_WITH_GET_INFO_V2.
	MinimumVersionWithGetInfoV2 uint32 = 2<<MajorVersionShift | 4
	// MinimumVersionWithGetAttr is GDRDRV_MINIMUM_VERSION_WITH_GET_ATTR.
	MinimumVersionWithGetAttr uint32 = 2<<MajorVersionShift | 5
	// MinimumVersionWithPinBufferV2 is GDRDRV_MINIMUM_VERSION_WITH_PIN_BUFFER_V2.
	MinimumVersionWithPinBufferV2 uint32 = 2<<MajorVersionShift | 5
	// MinimumVersionWithReqMappingType is
	// GDRDRV_MINIMUM_VERSION_WITH_REQ_MAPPING_TYPE.
	MinimumVersionWithReqMappingType uint32 = 2<<MajorVersionShift | 5
)

// GPU page geometry. gdrdrv.c __gdrdrv_pin_buffer accepts only NVIDIA page
// tables of 64 KiB pages and rounds every pin out to them.
const (
	GPUPageShift         = 16
	GPUPageSize   uint64 = 1 << GPUPageShift
	GPUPageOffset uint64 = GPUPageSize - 1
	GPUPageMask   uint64 = ^GPUPageOffset
)

// Possible mapping types (gdrdrv.h gdr_mr_type_t; the same values as
// gdrapi.h gdr_mapping_type_t).
const (
	MRNone    uint32 = 0
	MRWC      uint32 = 1
	MRCaching uint32 = 2
	MRDevice  uint32 = 3
)

// Possible GET_ATTR attributes (gdrdrv.h gdrdrv_attr_t). gdrdrv.c
// gdrdrv_get_attr answers EINVAL to any other value.
const (
	AttrUsePersistentMapping    uint32 = 1
	AttrSupportPinFlagForcePCIe uint32 = 2
)

// Possible PIN_BUFFER_V2 flags (gdrdrv.h GDRDRV_PIN_BUFFER_FLAG_*). gdrdrv.c
// gdrdrv_pin_buffer_v2 answers EINVAL to any other bit.
const (
	PinFlagDefault   uint32 = 0
	PinFlagForcePCIe uint32 = 1 // force a BAR1 mapping on coherent platforms
)

// IoctlType is GDRDRV_IOCTL, the _IOC_TYPE of every command. gdrdrv.c
// gdrdrv_ioctl answers EINVAL to a command of another type.
const IoctlType = 0xDA

// Ioctl command words (gdrdrv.h GDRDRV_IOC_*), all _IOWR.
//
// Six of the nine macros pass a pointer type to _IOWR, so the size encoded in
// their command word is sizeof(void *) = 8, not the size of the structure;
// the module matches the full word, so these values must be used verbatim.
// The module copies the full structure regardless of the encoded size.
const (
	IocPinBuffer      uint32 = 0xC028DA01 // struct by value: 40
	IocUnpinBuffer    uint32 = 0xC008DA02
	IocGetCBFlag      uint32 = 0xC008DA03
	IocGetInfo        uint32 = 0xC008DA04
	IocGetInfoV2      uint32 = 0xC008DA05 // driver >= 2.4
	IocGetAttr        uint32 = 0xC008DA06 // driver >= 2.5
	IocPinBufferV2    uint32 = 0xC020DA07 // struct by value: 32; driver >= 2.5
	IocReqMappingType uint32 = 0xC008DA08 // driver >= 2.5
	IocGetVersion     uint32 = 0xC008DAFF
)

// PinBufferParams is struct GDRDRV_IOC_PIN_BUFFER_PARAMS (40 bytes).
type PinBufferParams struct {
	_        structs.HostLayout
	Addr     uint64 // in: GPU virtual address
	Size     uint64 // in
	P2PToken uint64 // in: deprecated; must be 0 in persistent mode
	VASpace  uint32 // in: deprecated; must be 0 in persistent mode
	_        uint32 // C padding
	Handle   uint64 // out
}

// UnpinBufferParams is struct GDRDRV_IOC_UNPIN_BUFFER_PARAMS (8 bytes).
type UnpinBufferParams struct {
	_      structs.HostLayout
	Handle uint64 // in
}

// GetCBFlagParams is struct GDRDRV_IOC_GET_CB_FLAG_PARAMS (16 bytes).
type GetCBFlagParams struct {
	_      structs.HostLayout
	Handle uint64 // in
	Flag   uint32 // out: 1 once the NVIDIA free callback has run
	_      uint32 // C padding
}

// GetInfoParams is struct GDRDRV_IOC_GET_INFO_PARAMS (48 bytes).
type GetInfoParams struct {
	_          structs.HostLayout
	Handle     uint64 // in
	VA         uint64 // out: pinned address rounded down to a GPU page
	MappedSize uint64 // out: pinned span rounded out to GPU pages
	PageSize   uint32 // out: always 65536
	TSCKHz     uint32 // out: deprecated
	TMCycles   uint64 // out: deprecated
	Mapped     uint32 // out
	WCMapping  uint32 // out
}

// GetInfoV2Params is struct GDRDRV_IOC_GET_INFO_V2_PARAMS (48 bytes).
type GetInfoV2Params struct {
	_           structs.HostLayout
	Handle      uint64 // in
	VA          uint64 // out
	MappedSize  uint64 // out
	PageSize    uint32 // out
	TSCKHz      uint32 // out: deprecated
	TMCycles    uint64 // out: deprecated
	MappingType uint32 // out: one of MRNone, MRWC, MRCaching, MRDevice
	_           uint32 // C padding
}

// GetAttrParams is struct GDRDRV_IOC_GET_ATTR_PARAMS (8 bytes, align 4).
type GetAttrParams struct {
	_    structs.HostLayout
	Attr uint32 // in: AttrUsePersistentMapping or AttrSupportPinFlagForcePCIe
	Val  uint32 // out
}

// PinBufferV2Params is struct GDRDRV_IOC_PIN_BUFFER_V2_PARAMS (32 bytes).
type PinBufferV2Params struct {
	_      structs.HostLayout
	Addr   uint64 // in
	Size   uint64 // in
	Flags  uint32 // in: PinFlagDefault or PinFlagForcePCIe
	Pad    uint32 // in: the header names this field; libgdrapi sets it to 0
	Handle uint64 // out
}

// ReqMappingTypeParams is struct GDRDRV_IOC_REQ_MAPPING_TYPE_PARAMS
// (16 bytes).
type ReqMappingTypeParams struct {
	_           structs.HostLayout
	Handle      uint64 // in
	MappingType uint32 // in: MRNone lets the driver choose
	_           uint32 // C padding
}

// GetVersionParams is struct GDRDRV_IOC_GET_VERSION_PARAMS (8 bytes,
// align 4).
type GetVersionParams struct {
	_                 structs.HostLayout
	DriverVersion     uint32 // out: GDRDRV_VERSION of the loaded module
	MinimumAPIVersion uint32 // out: MINIMUM_GDR_API_VERSION of the module
}
