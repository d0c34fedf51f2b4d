"""The papers' findings reproduced on digits: Yadan et al.'s Table 1 (table1), Krizhevsky 2014's
FC passes (owt_variants), large-batch rules (large_batch), Paine's A-SGD and Su's
model averaging (asynchronous)."""
