# P10 (round 189): P9 (exp62/k_p9.cuh, stop 62's printer: the take's slot parity carried in Ahead)
# with the row's index loaded by the row before into Ahead, as p7_edit.py makes P7 of P6. Run in exp62/.
s = open('k_p9.cuh').read().replace('lossjit_kernel_p9(', 'lossjit_kernel_p10(')


def rep(a, b):
    global s
    assert s.count(a) == 1, a
    s = s.replace(a, b)


rep("""        int take_parity = 0;""", """        int take_parity = 0;
        long long index1;  // P10: the row's index, loaded by the row before""")
rep("""        for (int k = 0; k < kInputs; ++k) base[k] = lj::offset<R - 1>(c, in.strides[k]);
        const long long cache_columns = lj::row_cache_columns<Value, 1, Team::kPerBlock>();
        Value* const row_cache = Team::template team_cache<1>(lj::row_cache<Value>(), cache_columns);
        lj::LogSumExpAcc<Value> a1;""", """        for (int k = 0; k < kInputs; ++k) base[k] = lj::offset<R - 1>(c, in.strides[k]);
        ahead.index1 = lj::load_index(dtype(1), in.ptr[1], base[1]);
        const long long cache_columns = lj::row_cache_columns<Value, 1, Team::kPerBlock>();
        Value* const row_cache = Team::template team_cache<1>(lj::row_cache<Value>(), cache_columns);
        lj::LogSumExpAcc<Value> a1;""")
rep("""        const long long i_y = lj::load_index(dtype(1), in.ptr[1], base[1]);""", """        const long long i_y = ahead.index1;""")
rep("""            next_base_[0] = lj::offset<R - 1>(next_c, in.strides[0]);
            lj::prefetch_l2(dtype(1), in.ptr[1], lj::offset<R - 1>(next_c, in.strides[1]));""", """            next_base_[0] = lj::offset<R - 1>(next_c, in.strides[0]);
            ahead.index1 = lj::load_index(dtype(1), in.ptr[1], lj::offset<R - 1>(next_c, in.strides[1]));""")
open('k_p10.cuh', 'w').write(s)
open('tu_p10.cu', 'w').write(open('tu_p6.cu').read().replace('p6', 'p10'))
