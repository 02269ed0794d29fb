#!/usr/bin/env python3
"""Writes small Nsight Systems exports into tests/fuzz/seeds/store/ (committed; run by hand):
the tables the nsys importer reads, with the real column names, a few rows each, small pages."""
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "seeds", "store")
G = lambda pid: (1 << 48) | (pid << 24)

SCHEMA = """
PRAGMA page_size=512;
CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1,'gemm'),(2,'ncclDevKernel_AllReduce_Sum_f32_RING_LL'),(3,'cudaLaunchKernel'),
  (4,'ProfilerStep#1'),(5,'ncclDevKernel_SendRecv');
CREATE TABLE META_DATA_EXPORT(name TEXT NOT NULL, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION','3.25.0');
CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1779782330176752435,'','',28254349605);
CREATE TABLE TARGET_INFO_SYSTEM_ENV(globalVid INTEGER, devStateName TEXT NOT NULL, name TEXT NOT NULL,
  nameEnum INTEGER NOT NULL, value TEXT NOT NULL);
INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0,'','Hostname',0,'node1');
CREATE TABLE TARGET_INFO_GPU(id INTEGER, name TEXT, computeMajor INTEGER, computeMinor INTEGER, totalMemory INTEGER,
  smCount INTEGER);
INSERT INTO TARGET_INFO_GPU VALUES (0,'H100',9,0,85000000000,132);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER,
  shortName INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION(start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, syncType INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  text TEXT, globalTid INTEGER, textId INTEGER);
"""


def write(name, rows_per_rank, pids, devices):
    path = os.path.join(OUT, name)
    if os.path.exists(path):
        os.remove(path)
    c = sqlite3.connect(path)
    c.executescript(SCHEMA)
    corr = 0
    for pid in pids:
        for dev in devices:
            t = 28254349605 + 1000
            for i in range(rows_per_rank):
                corr += 1
                comm = i % 3 == 2
                c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,1,?,?,?,?,?)",
                          (t, t + 500, dev, 20 if comm else 7, corr, G(pid), 2 if comm else 1, 5 if comm else 1))
                c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,3,0)",
                          (t - 100, t - 50, G(pid) | 9, corr))
                t += 400
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,7,?,?,4096,10)", (t, t + 50, dev, corr, G(pid)))
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,7,?,?,0,64)", (t + 60, t + 70, dev, corr, G(pid)))
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,7,?,?,3)", (t, t + 80, dev, corr, G(pid)))
        c.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,59,NULL,NULL,?,4)", (28254349605, 28254349605 + 10**6, G(pid) | 9))
        c.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,59,NULL,'forward',?,NULL)", (28254349605, 28254349605 + 5000, G(pid) | 9))
        c.execute("INSERT INTO NVTX_EVENTS VALUES (?,NULL,60,1,'open',?,NULL)", (28254349605, G(pid) | 9))
    c.commit()
    c.close()


def write_payloads(name):
    """One rank whose NCCL ranges carry NVTX payloads (binaryData, src/importers/nvtx_payload.h),
    with NCCL's schemas as a real export lists them (tests/data/nsys/h100_ddp2.sqlite)."""
    import struct
    path = os.path.join(OUT, name)
    if os.path.exists(path):
        os.remove(path)
    c = sqlite3.connect(path)
    c.executescript(SCHEMA.replace("text TEXT, globalTid INTEGER, textId INTEGER);",
                                   "text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER, binaryData BLOB);"))
    c.executescript("""
CREATE TABLE NVTX_PAYLOAD_SCHEMAS(domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, flags INTEGER,
  numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER);
INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (1,16777218,NULL,1,NULL,4,24,NULL),(1,16777221,NULL,1,NULL,3,24,NULL);
CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES(domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, idx INTEGER NOT NULL,
  flags INTEGER, type INTEGER, name TEXT, description TEXT, arrayOrUnionDetail INTEGER, offset INTEGER);
INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (1,16777218,0,NULL,18,'NCCL communicator ID',NULL,NULL,NULL),
  (1,16777218,1,NULL,5,'No. of ranks',NULL,NULL,8),(1,16777218,2,NULL,5,'Rank',NULL,NULL,12),
  (1,16777218,3,NULL,5,'CUDA device',NULL,NULL,16),(1,16777221,0,NULL,18,'NCCL communicator ID',NULL,NULL,NULL),
  (1,16777221,1,NULL,22,'Message size [bytes]',NULL,NULL,8),(1,16777221,2,NULL,16777236,'Reduction operation',NULL,NULL,16);
INSERT INTO StringIds VALUES (10,'ncclAllReduce'),(11,'ncclCommInitRankConfig');
""")
    blob = lambda schema, payload: struct.pack('<QQQQ', 1, schema, 24, 56) + payload
    t = 28254349605 + 1000
    pid = 144
    c.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,59,NULL,NULL,?,11,1,?)",
              (t - 900, t - 800, G(pid) | 9, blob(16777218, struct.pack('<Qiii', 0xabc, 2, 1, 0) + bytes(4))))
    for i in range(3):
        c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,20,?,?,2,2)", (t, t + 500, i + 1, G(pid)))
        c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,3,0)", (t - 100, t - 50, G(pid) | 9, i + 1))
        c.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,59,NULL,NULL,?,10,1,?)",
                  (t - 150, t - 40, G(pid) | 9, blob(16777221, struct.pack('<QQi', 0xabc, 4096 << i, 0) + bytes(4))))
        t += 1000
    c.commit()
    c.close()


if __name__ == "__main__":
    write("nsys_one_rank.sqlite", 6, [144], [0])
    write("nsys_two_gpus_two_procs.sqlite", 4, [144, 145], [0, 1])
    write_payloads("nsys_nccl_payloads.sqlite")
    print("nsys seeds written to", OUT)
