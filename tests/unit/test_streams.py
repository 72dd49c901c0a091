# SPDX-License-Identifier: Apache-2.0
"""RecordWriter keeps records whole on the wire, relayed or not."""

from gvfs_openstack.nfs import connection
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy.streams import RecordWriter


class Wire:
    """A transport that records (copies) what is written to it."""

    def __init__(self, tls=False):
        self.data = bytearray()
        self.tls = tls
        self.aborted = False

    def write(self, data):
        self.data += bytes(data)

    def is_closing(self):
        return self.aborted

    def abort(self):
        self.aborted = True

    def get_extra_info(self, name):
        return object() if (name == "sslcontext" and self.tls) else None


def records(wire):
    reader = connection.RecordReader()
    reader.feed(bytes(wire.data))
    out = []
    while (record := reader.next_record()) is not None:
        out.append(bytes(record))
    return out


def test_records_written_during_a_relay_wait_for_its_end():
    wire = Wire()
    stats = counters.ListenerCounters()
    writer = RecordWriter(wire, stats, "downstream_bytes_out")
    assert writer.start_relay(10)
    assert not writer.start_relay(5)  # one relay at a time
    writer.relay_part(b"01234")
    writer.write_record((b"second",))
    writer.relay_part(b"56789")
    writer.write_record((b"third",))
    assert records(wire) == [b"0123456789", b"second", b"third"]
    assert stats.downstream_bytes_out == len(wire.data)


def test_many_pieces_are_gathered_into_one_record():
    for tls in (False, True):
        wire = Wire(tls)
        writer = RecordWriter(wire, counters.ListenerCounters(),
                              "downstream_bytes_out")
        pieces = [bytes([i]) * 70000 for i in range(5)]
        writer.write_record(pieces)
        writer.write_record([b"a", b"b", b"c"])
        assert records(wire) == [b"".join(pieces), b"abc"]


def test_nothing_is_written_once_closing():
    wire = Wire()
    writer = RecordWriter(wire, counters.ListenerCounters(),
                          "downstream_bytes_out")
    writer.abort()
    writer.write_record((b"late",))
    assert wire.data == b""
