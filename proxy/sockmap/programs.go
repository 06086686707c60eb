package sockmap

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Slot fields: offsets in a slot of the slots array (each a uint64).
const (
	offBytes  = 0  // bytes redirected (program)
	offPassed = 8  // bytes handed to the proxy (program)
	offAck    = 16 // bytes handed over that the proxy has forwarded (proxy)
	offLimit  = 24 // redirect while bytes stay at or below this; 0: no limit (proxy)
	offHold   = 32 // non-zero: hand everything to the proxy (proxy)
	offRem    = 40 // body bytes of the current client message still to come (program)
	offHdrN   = 48 // header bytes of the next message seen so far, 0-4 (program)
	offFlags  = 56 // FlagTerminate, FlagOverLimit, FlagLost (program)
	offHdrVal = 64 // length bytes of a header split between packets (program)
	offType   = 72 // type of the message whose header is being read (program)
	offUnsync = 80 // client messages sent since its last Query, Sync or FunctionCall (program)
	offQCopy  = 88 // since its last Query the client sent copy data only (program)
	slotSize  = 128
)

// Flags a program sets in a slot.
const (
	// FlagTerminate: the client sent Terminate, which was handed to the proxy.
	FlagTerminate = 1
	// FlagOverLimit: a message would have passed the redirect limit.
	FlagOverLimit = 2
	// FlagLost: the program lost track of client message boundaries (a malformed
	// length, or a packet with more messages than it walks): Terminate is then
	// not recognised.
	FlagLost = 4
)

// maxWalk bounds the messages the client verdict walks in one packet.
const maxWalk = 256

// Verdicts.
const (
	skDrop = 0
	skPass = 1
)

// Stack layout shared by the programs (offsets from R10).
const (
	stCookie = -8  // u64 key for route
	stSlot   = -16 // u32 key for slots
	stDst    = -24 // u64 key of the destination socket
	stBuf    = -32 // scratch for skb_load_bytes
	stIter   = -40 // loop counter
)

// prelude looks up the route and slot of the socket the skb belongs to: R6 = ctx,
// R7 = destination key stored at stDst, R9 = slot pointer. Without a route or a
// slot it jumps to label miss.
func prelude(route, slots *ebpf.Map, miss string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetSocketCookie.Call(),
		asm.StoreMem(asm.RFP, stCookie, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, route.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stCookie),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.DWord),
		asm.StoreMem(asm.RFP, stDst, asm.R7, asm.DWord),
		asm.LoadMem(asm.R8, asm.R0, 8, asm.Word),
		asm.StoreMem(asm.RFP, stSlot, asm.R8, asm.Word),
		asm.LoadMapPtr(asm.R1, slots.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stSlot),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, miss),
		asm.Mov.Reg(asm.R9, asm.R0),
	}
}

// verdict redirects an skb to its destination in dstMap, or hands it to the proxy
// (SK_PASS) while the slot holds, while handed-over bytes are unacknowledged, past
// the limit, and (terminate) for a client's Terminate message.
func verdict(route, slots, dstMap *ebpf.Map, terminate bool) asm.Instructions {
	insns := prelude(route, slots, "miss")
	// A segment with no data (a bare FIN) must not be redirected: the kernel's
	// sender takes a zero-length send as a broken pipe, reports EPIPE on the
	// destination socket and stops sending to it. The FIN itself is already
	// recorded on the source socket.
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R6, 0, asm.Word), // skb->len
		asm.JEq.Imm(asm.R1, 0, "drop"),
	)
	if terminate {
		insns = append(insns, terminateCheck()...)
		insns = append(insns, walk()...)
	}
	insns = append(insns,
		asm.LoadMem(asm.R1, asm.R9, offHold, asm.DWord).WithSymbol("check"),
		asm.JNE.Imm(asm.R1, 0, "pass"),
		asm.LoadMem(asm.R1, asm.R9, offPassed, asm.DWord),
		asm.LoadMem(asm.R2, asm.R9, offAck, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R2, "pass"),
		asm.LoadMem(asm.R3, asm.R6, 0, asm.Word), // skb->len
		asm.LoadMem(asm.R2, asm.R9, offBytes, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R3),
		asm.LoadMem(asm.R1, asm.R9, offLimit, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "redirect"),
		asm.JLE.Reg(asm.R2, asm.R1, "redirect"),
		asm.LoadMem(asm.R1, asm.R9, offFlags, asm.DWord),
		asm.Or.Imm(asm.R1, FlagOverLimit),
		asm.StoreMem(asm.R9, offFlags, asm.R1, asm.DWord),
		asm.Ja.Label("pass"),

		asm.StoreMem(asm.R9, offBytes, asm.R2, asm.DWord).WithSymbol("redirect"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.LoadMapPtr(asm.R2, dstMap.FD()),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stDst),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnSkRedirectHash.Call(),
		asm.Return(),

		asm.LoadMem(asm.R3, asm.R6, 0, asm.Word).WithSymbol("pass"),
		asm.LoadMem(asm.R2, asm.R9, offPassed, asm.DWord),
		asm.Add.Reg(asm.R2, asm.R3),
		asm.StoreMem(asm.R9, offPassed, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R0, skPass),
		asm.Return(),

		asm.Mov.Imm(asm.R0, skPass).WithSymbol("miss"),
		asm.Return(),

		asm.Mov.Imm(asm.R0, skDrop).WithSymbol("drop"),
		asm.Return(),
	)
	return insns
}

// terminateCheck hands a packet that is exactly one Terminate message, at a
// message boundary, to the proxy; otherwise it goes on at label walk.
func terminateCheck() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R1, asm.R9, offFlags, asm.DWord),
		asm.JSet.Imm(asm.R1, FlagLost, "check"),
		asm.LoadMem(asm.R1, asm.R9, offRem, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "walk"),
		asm.LoadMem(asm.R1, asm.R9, offHdrN, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "walk"),
		asm.LoadMem(asm.R1, asm.R6, 0, asm.Word), // skb->len
		asm.JNE.Imm(asm.R1, 5, "walk"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stBuf),
		asm.Mov.Imm(asm.R4, 5),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "walk"),
		asm.LoadMem(asm.R1, asm.RFP, stBuf, asm.Byte),
		asm.JNE.Imm(asm.R1, 'X', "walk"),
		asm.LoadMem(asm.R1, asm.RFP, stBuf+1, asm.Byte),
		asm.JNE.Imm(asm.R1, 0, "walk"),
		asm.LoadMem(asm.R1, asm.RFP, stBuf+2, asm.Half),
		asm.JNE.Imm(asm.R1, 0, "walk"),
		asm.LoadMem(asm.R1, asm.RFP, stBuf+4, asm.Byte),
		asm.JNE.Imm(asm.R1, 4, "walk"),
		asm.LoadMem(asm.R1, asm.R9, offFlags, asm.DWord),
		asm.Or.Imm(asm.R1, FlagTerminate),
		asm.StoreMem(asm.R9, offFlags, asm.R1, asm.DWord),
		asm.Ja.Label("pass"),
	}
}

// walk follows client message boundaries through the packet: R7 = position, R8 =
// packet length; the slot keeps what is left of a message between packets. It
// goes on at label check.
func walk() asm.Instructions {
	lost := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R9, offFlags, asm.DWord).WithSymbol("lost"),
		asm.Or.Imm(asm.R1, FlagLost),
		asm.StoreMem(asm.R9, offFlags, asm.R1, asm.DWord),
		asm.Ja.Label("check"),
	}
	insns := asm.Instructions{
		asm.LoadMem(asm.R1, asm.R9, offFlags, asm.DWord).WithSymbol("walk"),
		asm.JSet.Imm(asm.R1, FlagLost, "check"),
		asm.Mov.Imm(asm.R7, 0),
		asm.LoadMem(asm.R8, asm.R6, 0, asm.Word),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, stIter, asm.R1, asm.DWord),

		// Loop head.
		asm.LoadMem(asm.R1, asm.RFP, stIter, asm.DWord).WithSymbol("loop"),
		asm.JGE.Imm(asm.R1, maxWalk, "lost"),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.RFP, stIter, asm.R1, asm.DWord),
		asm.JGE.Reg(asm.R7, asm.R8, "check"),
		asm.LoadMem(asm.R1, asm.R9, offRem, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "header"),
		// Inside a message body: skip what this packet has of it.
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Sub.Reg(asm.R2, asm.R7), // available
		asm.JGT.Reg(asm.R1, asm.R2, "spans"),
		asm.Add.Reg(asm.R7, asm.R1),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R9, offRem, asm.R1, asm.DWord),
		asm.Ja.Label("loop"),
		asm.Sub.Reg(asm.R1, asm.R2).WithSymbol("spans"),
		asm.StoreMem(asm.R9, offRem, asm.R1, asm.DWord),
		asm.Ja.Label("check"),

		// At a header: whole in this packet, or a byte at a time.
		asm.LoadMem(asm.R1, asm.R9, offHdrN, asm.DWord).WithSymbol("header"),
		asm.JNE.Imm(asm.R1, 0, "bytewise"),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, 5),
		asm.JGT.Reg(asm.R2, asm.R8, "bytewise"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stBuf),
		asm.Mov.Imm(asm.R4, 1),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "lost"),
		asm.LoadMem(asm.R1, asm.RFP, stBuf, asm.Byte),
		asm.StoreMem(asm.R9, offType, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Add.Imm(asm.R2, 1),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stBuf),
		asm.Mov.Imm(asm.R4, 4),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "lost"),
		asm.LoadMem(asm.R1, asm.RFP, stBuf, asm.Word),
		asm.HostTo(asm.BE, asm.R1, asm.Word),
		asm.JLT.Imm(asm.R1, 4, "lost"),
		asm.Sub.Imm(asm.R1, 4),
		asm.StoreMem(asm.R9, offRem, asm.R1, asm.DWord),
		asm.Add.Imm(asm.R7, 5),
		asm.Ja.Label("msg"),

		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("bytewise"),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, stBuf),
		asm.Mov.Imm(asm.R4, 1),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "lost"),
		asm.Add.Imm(asm.R7, 1),
		asm.LoadMem(asm.R1, asm.R9, offHdrN, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "lenbyte"),
		asm.LoadMem(asm.R3, asm.RFP, stBuf, asm.Byte),
		asm.StoreMem(asm.R9, offType, asm.R3, asm.DWord),
		asm.Ja.Label("typebyte"),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("lenbyte"),
		asm.LoadMem(asm.R2, asm.R9, offHdrVal, asm.DWord),
		asm.LSh.Imm(asm.R2, 8),
		asm.LoadMem(asm.R3, asm.RFP, stBuf, asm.Byte),
		asm.Or.Reg(asm.R2, asm.R3),
		asm.StoreMem(asm.R9, offHdrVal, asm.R2, asm.DWord),
		asm.Add.Imm(asm.R1, 1).WithSymbol("typebyte"),
		asm.JEq.Imm(asm.R1, 5, "hdrdone"),
		asm.StoreMem(asm.R9, offHdrN, asm.R1, asm.DWord),
		asm.Ja.Label("loop"),
		asm.LoadMem(asm.R2, asm.R9, offHdrVal, asm.DWord).WithSymbol("hdrdone"),
		asm.JLT.Imm(asm.R2, 4, "lost"),
		asm.Sub.Imm(asm.R2, 4),
		asm.StoreMem(asm.R9, offRem, asm.R2, asm.DWord),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R9, offHdrN, asm.R1, asm.DWord),
		asm.StoreMem(asm.R9, offHdrVal, asm.R1, asm.DWord),

		// A whole header was read: note whether the client is between queries,
		// as the pumps' sessionTrack does. R2: unsynced, R3: copy after a Query.
		// CopyDone or CopyFail right after a Query and its copy data is answered
		// by the Query's ReadyForQuery; after anything else a Sync must follow.
		asm.LoadMem(asm.R1, asm.R9, offType, asm.DWord).WithSymbol("msg"),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Imm(asm.R3, 0),
		asm.JEq.Imm(asm.R1, 'X', "loop"),
		asm.JEq.Imm(asm.R1, 'd', "copydata"),
		asm.JEq.Imm(asm.R1, 'Q', "query"),
		asm.JEq.Imm(asm.R1, 'S', "sync"),
		asm.JEq.Imm(asm.R1, 'F', "sync"),
		asm.JEq.Imm(asm.R1, 'c', "copyend"),
		asm.JEq.Imm(asm.R1, 'f', "copyend"),
		asm.Mov.Imm(asm.R2, 1),
		asm.Ja.Label("sync"),
		asm.Mov.Imm(asm.R3, 1).WithSymbol("query"),
		asm.Ja.Label("sync"),
		asm.LoadMem(asm.R4, asm.R9, offQCopy, asm.DWord).WithSymbol("copyend"),
		asm.JNE.Imm(asm.R4, 0, "sync"),
		asm.Mov.Imm(asm.R2, 1),
		asm.Ja.Label("sync"),
		asm.Mov.Imm(asm.R2, 1).WithSymbol("copydata"),
		asm.StoreMem(asm.R9, offUnsync, asm.R2, asm.DWord),
		asm.Ja.Label("loop"),
		asm.StoreMem(asm.R9, offUnsync, asm.R2, asm.DWord).WithSymbol("sync"),
		asm.StoreMem(asm.R9, offQCopy, asm.R3, asm.DWord),
		asm.Ja.Label("loop"),
	}
	return append(insns, lost...)
}
