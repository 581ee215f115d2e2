# carried-lspci.sh, sourced with DIR in $d: makes /tmp/L/lspci, a copy of DIR/lspci
# that runs with the C library it was built against (DIR/lib, laid out as
# scripts/topo-timing.sh says) on a machine where pciutils is not installed, and puts
# DIR/pci.ids where lspci and p2pcheck look for it if nothing is there. The copy's ELF
# interpreter is /tmp/L's, a path as long as /lib64/ld-linux-x86-64.so.2.
rm -rf /tmp/L && cp -r "$d/lib" /tmp/L || exit 1
python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); a = b"/lib64/ld-linux-x86-64.so.2"
assert b.count(a) == 1; open(sys.argv[2], "wb").write(b.replace(a, b"/tmp/L/ld-linux-x86-64.so.2"))' "$d/lspci" /tmp/L/lspci || exit 1
chmod +x /tmp/L/lspci
[ -e /usr/share/misc/pci.ids ] || { mkdir -p /usr/share/misc && cp "$d/pci.ids" /usr/share/misc/pci.ids; }
