// Package nccl predicts how NCCL will move data on a node: for each pair of GPUs
// the transport it chooses (P2P over NVLink or PCIe, P2P through CUDA memcpy, SHM
// through host memory, or the network), for each GPU and network device whether it
// uses GPUDirect RDMA, and whether it uses GDRCopy, each with the reason and the
// NCCL setting that would change it.
//
// It works the way NCCL does. The machine is first written as NCCL's topology XML
// (the file NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE reads; ncclTopoGetXmlFromSys
// and ncclTopoGetXmlFromGpu in src/graph/xml.cc), that XML is turned into NCCL's
// system graph (ncclTopoGetSystemFromXml in src/graph/topo.cc), and the paths between
// GPUs, CPUs and network devices are computed as ncclTopoComputePaths in
// src/graph/paths.cc computes them, with the same hop counts, bandwidths and path
// types NCCL prints in its NCCL_DEBUG=INFO "GPU/0-60 :GPU/0-60 (0/5000.0/LOC) ..."
// lines. The transport rules mirror src/transport/p2p.cc, shm.cc and net.cc.
//
// The rules encode NCCL 2.28's defaults; where an older release decided otherwise
// (the default P2P level before 2.23, cuMem before 2.19) the Version decides.
// Everything here is pure: settings, loaded modules and network devices come from
// the caller. Parsers (the topology XML, configuration files, INFO logs) bound their
// input and never panic.
package nccl
